//! What `nhbm top` draws of a [`Census`]: per device a title line (name,
//! address, arch, state, HBM used of total), a bar per HBM channel, then
//! one row per process holding it (pid, command, user, HBM per channel,
//! plans, mapped bytes), most HBM first; what the caller could not see at
//! the bottom. A ratatui widget, so the same view goes to a terminal or to
//! a plain buffer.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use crate::census::{Census, DeviceCensus, DeviceState, Holder};
use crate::fmt;

/// The view of one census.
pub struct View<'a> {
    /// What to show.
    pub census: &'a Census,
    /// Seconds between refreshes, for the heading.
    pub interval: f64,
    /// Draw in colour (a terminal, and no NO_COLOR).
    pub colour: bool,
}

impl View<'_> {
    /// The view's lines, top to bottom.
    pub fn lines(&self) -> Vec<Line<'static>> {
        let c = self.census;
        let mut out = vec![Line::from(vec![
            Span::styled(
                "nhbm top",
                self.style(Style::new().add_modifier(Modifier::BOLD)),
            ),
            Span::raw(format!(
                "  {} devices, every {} s  (q quits)",
                c.devices.len(),
                self.interval
            )),
        ])];
        for d in &c.devices {
            out.push(Line::raw(""));
            self.device(d, &mut out);
        }
        if c.devices.is_empty() {
            out.push(Line::raw("no neuron_hbm device (is the module loaded?)"));
        }
        let notes = c.unseen();
        if !notes.is_empty() {
            out.push(Line::raw(""));
        }
        for n in notes {
            out.push(Line::styled(
                format!("note: {n}"),
                self.style(Style::new().fg(Color::Yellow)),
            ));
        }
        out
    }

    /// `s` in colour, the plain style without.
    fn style(&self, s: Style) -> Style {
        if self.colour {
            s
        } else {
            Style::new()
        }
    }

    /// Device `d`'s title, bars and process rows.
    fn device(&self, d: &DeviceCensus, out: &mut Vec<Line<'static>>) {
        let (used, exact) = d.used_bytes();
        let state = match d.state {
            DeviceState::Ready => Color::Green,
            DeviceState::Resetting => Color::Yellow,
            DeviceState::Removed
            | DeviceState::NoAccess
            | DeviceState::Unanswered
            | DeviceState::ResetStateUnknown => Color::Red,
        };
        out.push(Line::from(vec![
            Span::styled(
                d.name(),
                self.style(Style::new().add_modifier(Modifier::BOLD)),
            ),
            Span::raw(format!("  {}  v{}  ", d.address(), d.arch)),
            Span::styled(d.state.as_str(), self.style(Style::new().fg(state))),
            Span::raw(format!(
                "  HBM {}{} of {}",
                if exact { "" } else { ">= " },
                fmt::bytes(used),
                d.total_bytes().map_or_else(|| "?".to_string(), fmt::bytes)
            )),
        ]));
        for ch in &d.channels {
            let (u, _) = d.used_on(ch.channel);
            let Some(total) = ch.total_bytes else {
                continue;
            };
            out.push(Line::from(vec![
                Span::raw(format!("  hbm{} ", ch.channel)),
                Span::styled(
                    fmt::bar(u, total, 30),
                    self.style(Style::new().fg(Color::Cyan)),
                ),
                Span::raw(format!(" {:>10} of {}", fmt::bytes(u), fmt::bytes(total))),
            ]));
        }
        if d.processes.is_empty() {
            out.push(Line::raw("  no process holds it"));
            return;
        }
        let mut head = format!("  {:>7} {:<15} {:<8}", "PID", "COMMAND", "USER");
        for ch in &d.channels {
            head.push_str(&format!(" {:>9}", format!("HBM{}", ch.channel)));
        }
        head.push_str(&format!(" {:>5} {:>9}", "PLANS", "MAPPED"));
        out.push(Line::styled(
            head,
            self.style(Style::new().add_modifier(Modifier::REVERSED)),
        ));
        out.extend(d.processes.iter().map(|p| Line::raw(row(p))));
    }
}

/// One process's row, in the columns of the heading.
fn row(p: &Holder) -> String {
    let user = p.user.clone().unwrap_or_else(|| p.uid.to_string());
    let command = match p.pid_namespace {
        Some(_) => format!("{}*", p.command),
        None => p.command.clone(),
    };
    let mut s = format!("  {:>7} {:<15.15} {:<8.8}", p.pid, command, user);
    for b in &p.hbm_bytes {
        s.push_str(&format!(" {:>9}", fmt::bytes(*b)));
    }
    let plans = p.plans.map_or_else(|| "?".to_string(), |n| n.to_string());
    s.push_str(&format!(" {plans:>5} {:>9}", fmt::bytes(p.mapped_bytes)));
    s
}

impl Widget for &View<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        Paragraph::new(self.lines()).render(area, buf);
    }
}

/// The view as plain text, `width` columns wide, every line of it.
pub fn plain(view: &View<'_>, width: u16) -> String {
    let height = view.lines().len() as u16;
    let area = Rect::new(0, 0, width, height);
    let mut buf = Buffer::empty(area);
    view.render(area, &mut buf);
    let mut out = String::new();
    for y in 0..height {
        let line: String = (0..width).map(|x| buf[(x, y)].symbol()).collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::census::sample;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;

    #[test]
    fn both_tenants_show_on_an_80_by_24_screen() {
        let census = sample::census();
        let view = View {
            census: &census,
            interval: 1.0,
            colour: true,
        };
        let mut t = Terminal::new(TestBackend::new(80, 24)).unwrap();
        t.draw(|f| f.render_widget(&view, f.area())).unwrap();
        let screen: Vec<String> = t
            .backend()
            .buffer()
            .content
            .chunks(80)
            .map(|l| {
                l.iter()
                    .map(|c| c.symbol())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect();
        let text = screen.join("\n");
        let find = |s: &str| {
            screen
                .iter()
                .position(|l| l.contains(s))
                .unwrap_or_else(|| panic!("{s} not in\n{text}"))
        };
        assert!(
            screen[2].starts_with("neuron_hbm0  sim:0  v2  ready  HBM 52.0 MiB of 32.0 GiB"),
            "{text}"
        );
        assert!(screen[3].starts_with("  hbm0 [#"), "{text}");
        // Most HBM first: alice's 36 MiB above the 16 MiB of uid 1001.
        let a = find("     4242 tenant \"a\"      alice     32.0 MiB   4.0 MiB     2       0 B");
        let b = find("     4343 tenant-b        1001      16.0 MiB       0 B     1   8.0 KiB");
        assert!(a < b, "{text}");
        let n = find("neuron_hbm1  0000:00:1e.0  v3  no_access  HBM >= 0 B of ?");
        // No bars for a device whose sizes are unknown.
        assert_eq!(screen[n + 1], "  no process holds it", "{text}");
        find("note: 3 processes of other users");
        // Colours on a terminal, none without.
        let cell = |t: &Terminal<TestBackend>| t.backend().buffer()[(7, 3)].fg;
        assert_eq!(cell(&t), Color::Cyan);
        let plain_view = View {
            colour: false,
            ..view
        };
        t.draw(|f| f.render_widget(&plain_view, f.area())).unwrap();
        assert_eq!(cell(&t), Color::Reset);
    }

    #[test]
    fn plain_text_has_every_line() {
        let census = sample::census();
        let view = View {
            census: &census,
            interval: 2.0,
            colour: false,
        };
        let text = plain(&view, 80);
        assert_eq!(text.lines().count(), view.lines().len());
        assert!(
            text.starts_with("nhbm top  2 devices, every 2 s  (q quits)\n"),
            "{text}"
        );
        assert!(text.contains("\n     4343 tenant-b "), "{text}");
    }
}
