"""Inter-rater agreement and correlation statistics (pure numpy; no Django).

Public statistics (each returns a Python ``float``):

- :func:`cohen_kappa` -- Cohen's kappa, unweighted, linear or quadratic weights.
- :func:`fleiss_kappa` -- Fleiss' kappa for a fixed number of raters per item.
- :func:`kendall_w` -- Kendall's coefficient of concordance W with tie correction.
- :func:`kendall_tau` -- Kendall's tau-b or Stuart's tau-c.
- :func:`krippendorff_alpha` -- Krippendorff's alpha (nominal, ordinal, interval), NaN = missing.
- :func:`pearson`, :func:`spearman` -- product-moment and rank correlation.

Building blocks for small-integer ratings (ratings on a 1-5 scale reduce to small
contingency tables, so these run in O(n + k^2) instead of O(n^2)):

- :func:`encode_categories` -- labels to integer codes ``0..k-1``.
- :func:`contingency_table` / :func:`batched_contingency_tables`.
- :func:`kendall_tau_from_table` / :func:`batched_kendall_tau_from_tables`.
- :func:`category_counts` / :func:`batched_category_counts` (items x categories counts).
- :func:`fleiss_kappa_from_counts` / :func:`batched_fleiss_kappa_from_counts`, and
  :func:`batched_fleiss_kappa_from_codes` (no count matrix; fastest for few raters).
- :func:`batched_kendall_w_from_codes` (bincount-based midranks).
- :func:`batched_joint_counts` (m-way table of rating profiles).

The ``batched_*`` functions take arrays with any number of leading batch axes (for
example 100 virtual-rater repetitions) and return one value per batch element.
Example, VICR virtual raters (PROTOCOLS.md section 2) with ``codes`` of shape
(100, n_pairs, 3) holding the sorted ratings minus 1 (so X, Y, Z = codes[..., 0/1/2])::

    joint = batched_joint_counts(codes, 5)  # (100, 5, 5, 5): one bincount
    t_xy, t_xz, t_yz = joint.sum(axis=3), joint.sum(axis=2), joint.sum(axis=1)
    # "method A": the candidate repeated per reference rater, the references
    # concatenated; tabulating those flattened vectors = summing the pairwise tables.
    tau_x_yz = batched_kendall_tau_from_tables(t_xy + t_xz, "c")  # shape (100,)
    tau_y_xz = batched_kendall_tau_from_tables(t_xy.swapaxes(-1, -2) + t_yz, "c")
    tau_z_xy = batched_kendall_tau_from_tables((t_xz + t_yz).swapaxes(-1, -2), "c")
    w = batched_kendall_w_from_codes(codes, 5)  # shape (100,)
    kappa = batched_fleiss_kappa_from_codes(np.minimum(codes, 3), 4)  # 4 and 5 merged

Undefined statistics are never returned as NaN: when a statistic is 0/0 (a constant
rater, all ratings in one category, no pairable unit...) a ``ValueError`` says why.
A batched function raises if any batch element is undefined and names the first one.
Input checks shared with the other rubrics modules live in :mod:`rubrics.checks`.

Each statistic lives in a small module named for what it holds, and every public name is
importable from ``rubrics.agreement``: :mod:`~rubrics.agreement.tables` (codes, contingency
tables, category counts), :mod:`~rubrics.agreement.profiles` (rating profiles),
:mod:`~rubrics.agreement.tau`, :mod:`~rubrics.agreement.kappa`,
:mod:`~rubrics.agreement.concordance` (Kendall's W), :mod:`~rubrics.agreement.correlation`
(Pearson, Spearman) and :mod:`~rubrics.agreement.alpha` (Krippendorff); the argument
checks they share are in :mod:`~rubrics.agreement.inputs`.
"""

from rubrics.agreement.alpha import AlphaLevel, krippendorff_alpha
from rubrics.agreement.concordance import batched_kendall_w_from_codes, kendall_w
from rubrics.agreement.correlation import pearson, spearman
from rubrics.agreement.kappa import (
    Weights,
    batched_fleiss_kappa_from_codes,
    batched_fleiss_kappa_from_counts,
    cohen_kappa,
    fleiss_kappa,
    fleiss_kappa_from_counts,
)
from rubrics.agreement.profiles import batched_joint_counts
from rubrics.agreement.tables import (
    batched_category_counts,
    batched_contingency_tables,
    category_counts,
    contingency_table,
    encode_categories,
)
from rubrics.agreement.tau import (
    TauVariant,
    batched_kendall_tau_from_tables,
    kendall_tau,
    kendall_tau_from_table,
)

__all__ = [
    "TauVariant",
    "Weights",
    "AlphaLevel",
    "encode_categories",
    "contingency_table",
    "batched_contingency_tables",
    "kendall_tau_from_table",
    "batched_kendall_tau_from_tables",
    "category_counts",
    "batched_category_counts",
    "fleiss_kappa_from_counts",
    "batched_fleiss_kappa_from_counts",
    "batched_fleiss_kappa_from_codes",
    "batched_kendall_w_from_codes",
    "batched_joint_counts",
    "cohen_kappa",
    "fleiss_kappa",
    "kendall_w",
    "kendall_tau",
    "krippendorff_alpha",
    "pearson",
    "spearman",
]
