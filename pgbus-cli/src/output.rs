//! Where the command's text goes: through a pager and in colour on a
//! terminal, plain otherwise.

use std::io::{IsTerminal, Write};
use std::process::{Command, Stdio};

use comfy_table::{Cell, Color, ContentArrangement, Table, presets};
use pgbus_runtime::RunStatus;

/// How output is written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Output {
    /// Standard output is a terminal.
    terminal: bool,
    /// Colours wanted (a terminal, and `NO_COLOR` unset).
    color: bool,
}

impl Output {
    pub(crate) fn detect() -> Self {
        let terminal = std::io::stdout().is_terminal();
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Self {
            terminal,
            color: terminal && !no_color,
        }
    }

    /// `text` on one line ([`crate::commands::visible`]), cut to `max`
    /// characters on a terminal, where a table must fit a screen; whole
    /// otherwise, since a file or a pipe (a log, `grep`, a bug report)
    /// wants the error an operator will search for, not its first words.
    pub(crate) fn clip(self, text: &str, max: usize) -> String {
        crate::commands::clip(text, self.width(max))
    }

    /// `max` on a terminal, no bound otherwise: how wide a clipped value
    /// may be (see [`Output::clip`]).
    pub(crate) fn width(self, max: usize) -> usize {
        if self.terminal { max } else { usize::MAX }
    }

    /// A table of `header` columns in the house look.
    pub(crate) fn table(self, header: &[&str]) -> Table {
        let mut table = Table::new();
        table
            .load_preset(presets::NOTHING)
            .set_content_arrangement(ContentArrangement::Disabled)
            .set_header(header.iter().map(|h| Cell::new(h.to_uppercase())));
        if self.color {
            table.enforce_styling();
        } else {
            table.force_no_tty();
        }
        table
    }

    /// A run status, coloured by what it means for an operator.
    pub(crate) fn status(self, status: RunStatus) -> Cell {
        let cell = Cell::new(status.as_str());
        if !self.color {
            return cell;
        }
        cell.fg(match status {
            RunStatus::Finished => Color::Green,
            RunStatus::Paused => Color::Yellow,
            RunStatus::Cancelled => Color::Red,
            RunStatus::Ready | RunStatus::Performing => Color::Cyan,
        })
    }

    /// A heading line.
    pub(crate) fn heading(self, text: &str) -> String {
        if self.color {
            format!("\x1b[1m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// A line an operator must not miss (a run no worker can run): yellow
    /// and bold on a terminal.
    pub(crate) fn warning(self, text: &str) -> String {
        if self.color {
            format!("\x1b[1;33m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    /// Writes one short line (a command's answer), never paged.
    #[allow(clippy::unused_self)] // beside `emit`, so every write goes through `Output`
    pub(crate) fn line(self, text: &str) -> std::io::Result<()> {
        Self::write_out(&format!("{text}\n"))
    }

    /// Writes `text` as it is, never paged (what more lines will follow).
    #[allow(clippy::unused_self)] // beside `emit`, so every write goes through `Output`
    pub(crate) fn print(self, text: &str) -> std::io::Result<()> {
        Self::write_out(text)
    }

    /// Writes `text`: through `$PAGER` (else `less -FRX`, which quits when it
    /// fits one screen) on a terminal, straight out otherwise or when no pager
    /// starts.
    pub(crate) fn emit(self, text: &str) -> std::io::Result<()> {
        if self.terminal && text.lines().count() > 20 {
            let pager = std::env::var("PAGER")
                .ok()
                .filter(|p| !p.trim().is_empty())
                .unwrap_or_else(|| "less -FRX".to_owned());
            // Through the shell, as other tools run `$PAGER`, so a value with
            // quotes or options works.
            if let Ok(mut child) = Command::new("sh")
                .arg("-c")
                .arg(&pager)
                .stdin(Stdio::piped())
                .spawn()
            {
                if let Some(mut stdin) = child.stdin.take() {
                    // A pager quit early closes its input: not an error.
                    let _ = stdin.write_all(text.as_bytes());
                }
                // 126/127: the shell could not run the pager; show the text
                // here instead of losing it.
                if !matches!(child.wait()?.code(), Some(126 | 127)) {
                    return Ok(());
                }
            }
        }
        Self::write_out(text)
    }

    /// Writes to standard output; a reader that went away (`| head`) is not
    /// an error.
    fn write_out(text: &str) -> std::io::Result<()> {
        let mut stdout = std::io::stdout().lock();
        match stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
        {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            other => other,
        }
    }
}
