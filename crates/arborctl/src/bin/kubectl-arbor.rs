//! `kubectl-arbor`: arborctl as a kubectl plugin, so that `kubectl arbor status` works.

fn main() -> std::process::ExitCode {
    arborctl::main("kubectl arbor")
}
