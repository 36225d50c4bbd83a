"""How samples are taken and judged: the measurement protocol (interleaved arms,
predecessors), verdicts from intervals, and whether an instrument can resolve a band.
"""
