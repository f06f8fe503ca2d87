"""Descriptions in context, judged by the people who need them (issue 43).

From Kreiss et al., "Context Matters for Image Descriptions for Accessibility: Challenges
for Referenceless Evaluation Metrics" (EMNLP 2022), and ContextRef (Kreiss et al., ICLR
2024), which built a benchmark on the same protocol: an image description is shown where
the image appears (a short passage, the page's title and its domain: news, shopping,
social media, encyclopedia...) and rated first without the image (its overall quality as
alt text there, how well the rater can imagine the image, its relevance to the context,
its irrelevant detail), then, by sighted raters only, with the image (accuracy, overall
again, what is missing). Blind and low-vision raters never get the image part; their
ratings and the sighted raters' are reported apart. ``protocol`` holds the items and the
rules, ``pages`` the screen-reader-first annotator; the rest is wired in ``mode``.
"""
