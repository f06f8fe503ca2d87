"""Automatic judges: raters that are not people (issue 25).

- :mod:`annotation.judges.client` -- a batch client for OpenAI-compatible
  ``/v1/chat/completions`` endpoints (VLM-as-a-judge).
- :mod:`annotation.judges.clip` -- CLIP-S / RefCLIP-S from ONNX encoders the researcher supplies.

No models and no database here: the platform's services store what these return, apart
from human judgments.
"""
