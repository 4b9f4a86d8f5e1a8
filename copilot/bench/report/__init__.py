"""The pages of a run: `report.html` with its tables and measures, one audit page per episode, the galleries of
final views across repeats, and the Track C montages."""
