"""The one door into the library: settings, one entry per analysis, cached chains, checkpoint series and sweeps."""
