from pathlib import Path

import pytest

SHARED_DIR = Path(__file__).resolve().parents[2].parent / "shared"


@pytest.fixture
def shared_datasets() -> Path:
    """The reference datasets folder beside the repository; skip when a fresh clone lacks it."""
    datasets = SHARED_DIR / "datasets"
    if not datasets.is_dir():
        pytest.skip(f"reference datasets not found at {datasets} (../shared is absent)")
    return datasets


@pytest.fixture(autouse=True)
def isolated_files():
    """rubrics is pure Python: no Django settings, media or Celery to isolate."""
    yield
