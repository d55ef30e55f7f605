//! `nhbm completions SHELL` and `nhbm manpage`: the shell completion
//! scripts and the manual page, generated from the command line's
//! declaration on stdout, for packaging (`nhbm completions bash >
//! nhbm.bash`, `nhbm manpage > nhbm.1`).

use std::io::Write;

use anyhow::Result;
use clap::CommandFactory;
use clap_complete::Shell;

use crate::args::Cli;

/// Writes the completion script for `shell` to `out`.
pub fn completions(shell: Shell, out: &mut dyn Write) -> Result<()> {
    clap_complete::generate(shell, &mut Cli::command(), "nhbm", out);
    Ok(())
}

/// Writes the manual page, nhbm(1), as roff to `out`.
pub fn manpage(out: &mut dyn Write) -> Result<()> {
    clap_mangen::Man::new(Cli::command()).render(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shell_completes_the_subcommands() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut out = Vec::new();
            completions(shell, &mut out).unwrap();
            let text = String::from_utf8(out).unwrap();
            for word in [
                "nhbm",
                "plan",
                "validate",
                "load",
                "budget",
                "svg",
                "monitor",
                "prometheus",
                "top",
            ] {
                assert!(text.contains(word), "{shell}: {word} missing");
            }
        }
    }

    #[test]
    fn the_manpage_lists_the_subcommands_and_exit_statuses() {
        let mut out = Vec::new();
        manpage(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with(".ie") || text.contains(".TH nhbm 1"),
            "{text}"
        );
        for word in [
            "plan",
            "validate",
            "stats",
            "Exit status",
            "nhbm\\-ls",
            "nhbm\\-monitor",
            "nhbm\\-top",
        ] {
            assert!(text.contains(word), "{word} missing");
        }
    }
}
