"""The Subspace PGA math and its companions: readout basis, CCR, ranks, spectra, convergence, probes, token map."""
