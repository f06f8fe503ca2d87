"""Builders shared by the tests: studies, participants and helpers, one module per area.

``core`` holds what every area uses (the test-rating study, crowd participants, the race
helper and the service switches); ``thumb``, ``vicr`` and ``humanr`` build studies of each
mode. Test modules import from here, never from one another.
"""
