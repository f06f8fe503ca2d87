"""The annotation app: studies, images, captions, items, participants, assignments,
judgments, jobs and exports, with one module per protocol under ``modes/``."""
