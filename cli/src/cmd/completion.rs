//! `completion bash|zsh|fish`.

use crate::cli::Shell;
use std::io::Write;

pub fn print(shell: Shell, cmd: &mut clap::Command) {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    // Generated into memory first: clap_complete panics on a closed pipe (`| head`).
    let mut buf = Vec::new();
    clap_complete::generate(shell, cmd, "kubectl-kruise", &mut buf);
    let _ = std::io::stdout().write_all(&buf);
}
