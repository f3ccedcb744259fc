//! Helpers shared by the end-to-end tests: locating the built binaries and fixture repositories.
