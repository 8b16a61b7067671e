//! Hosts the integration tests, examples and benchmarks of the grad workspace.
