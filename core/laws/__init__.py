"""What a law is and how laws are found: the Law interface, the hookspecs, the registry of
built-in and third-party laws, and the Command record a law adds to the command line.
"""
