"""The test-rating export: the default table (common columns, payload and result as JSON)."""

from annotation.modes.base import Export


class RatingExport(Export):
    row_unit = "rating"
    exclusion_rules = "Nothing is excluded."
