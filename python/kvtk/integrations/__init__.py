"""Adapters that put kvtk policies inside serving engines (see docs/python.md)."""
