"""Cases under benchmarks/ are produced by the bcas plugin from the chosen grids."""
