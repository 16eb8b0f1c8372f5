"""Model discovery against a simulated larval zebrafish (simZFish-like ground truth)."""
