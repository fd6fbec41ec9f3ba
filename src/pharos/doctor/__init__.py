"""`pharos doctor`'s logic: examine a backend as serve would, and report it (cmd/doctor.py
only parses the arguments)."""
