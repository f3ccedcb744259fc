//! The `arborctl` binary; the CLI itself is the library's [`arborctl::main`].

fn main() -> std::process::ExitCode {
    arborctl::main("arborctl")
}
