"""Second-line review: queries over the decision log, seeded samples, the Review aggregate."""
