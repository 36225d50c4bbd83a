"""The cache's one signing rule: an HMAC-SHA256 with $LAWBENCH_CACHE_KEY over a JSON body.

It lives in store/ (beneath engines/) because both sign with it: the engine build's manifest
(core/engines/build_trust.py) and the models' stamps (core/store/model_stamp.py)."""
from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Optional

KEY_ENV = "LAWBENCH_CACHE_KEY"


def sign(body: dict) -> Optional[str]:
    """HMAC-SHA256 of ``body`` with $LAWBENCH_CACHE_KEY (None without it): manifests and model stamps."""
    key = os.environ.get(KEY_ENV)
    if not key:
        return None
    text = json.dumps(body, sort_keys=True).encode()
    return hmac.new(key.encode(), text, hashlib.sha256).hexdigest()
