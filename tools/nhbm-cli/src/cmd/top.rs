//! `nhbm top`: the live view of [`crate::top_view`], redrawn every
//! interval until `q` (or Esc, or Ctrl-C) is pressed. Not on a terminal,
//! it prints the view once, 80 columns wide and without colour.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::Result;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::DefaultTerminal;

use crate::census;
use crate::top_view::{self, View};

/// Shows the devices (device `only`, when named), refreshed every
/// `interval` seconds.
pub fn run(interval: f64, only: Option<u32>) -> Result<()> {
    if !std::io::stdout().is_terminal() {
        let c = census::take().only(only);
        let view = View {
            census: &c,
            interval,
            colour: false,
        };
        print!("{}", top_view::plain(&view, 80));
        return Ok(());
    }
    let colour = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let mut terminal = ratatui::try_init()?;
    let r = live(&mut terminal, interval, only, colour);
    ratatui::restore();
    r
}

/// Draws and waits for keys until one quits.
fn live(t: &mut DefaultTerminal, interval: f64, only: Option<u32>, colour: bool) -> Result<()> {
    let every = Duration::from_secs_f64(interval);
    loop {
        let c = census::take().only(only);
        let view = View {
            census: &c,
            interval,
            colour,
        };
        t.draw(|f| f.render_widget(&view, f.area()))?;
        let next = Instant::now() + every;
        loop {
            let left = next.saturating_duration_since(Instant::now());
            if left.is_zero() || !event::poll(left)? {
                break;
            }
            match event::read()? {
                Event::Key(k) if k.kind == KeyEventKind::Press && quits(k.code, k.modifiers) => {
                    return Ok(())
                }
                Event::Resize(..) => t.draw(|f| f.render_widget(&view, f.area())).map(|_| ())?,
                _ => {}
            }
        }
    }
}

/// `q`, Esc and Ctrl-C quit.
fn quits(code: KeyCode, m: KeyModifiers) -> bool {
    matches!(code, KeyCode::Char('q') | KeyCode::Esc)
        || (code == KeyCode::Char('c') && m.contains(KeyModifiers::CONTROL))
}
