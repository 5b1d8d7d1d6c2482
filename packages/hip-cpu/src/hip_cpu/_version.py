"""The lockstep version of the hip-backend distributions (see tools/version.py)."""

__version__ = "0.1.0"
