"""The claims: anchor files (loading and cross-checks), the claims inventory, the public
record's quote cache, lawbench's own stakes, and REGISTER.md generated from them.
"""
