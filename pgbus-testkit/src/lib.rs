//! Placeholder. The in-memory store, virtual clock and step harness that let a
//! workflow be tested step by step without a database are not built yet; this
//! crate holds their place in the workspace so dependents can name it.
