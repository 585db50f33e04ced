"""Data preparation: sources → records→text → quality → tokens → blocks → Arrow, published once."""
