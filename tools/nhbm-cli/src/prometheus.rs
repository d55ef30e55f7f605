//! A [`Census`] in Prometheus's text exposition format (version 0.0.4):
//! one `# HELP` and `# TYPE` per metric, then its samples. Every figure is
//! a gauge (a level that goes up and down, none a count since a start), so
//! no name ends in `_total`; sizes are in bytes and say so (`_bytes`).

use std::fmt::Write;

use crate::census::{Census, DeviceCensus, Holder};

/// One metric: its name, help text and samples (`{labels} value`).
struct Metric {
    name: &'static str,
    help: &'static str,
    samples: Vec<(String, u64)>,
}

impl Metric {
    fn new(name: &'static str, help: &'static str) -> Metric {
        Metric {
            name,
            help,
            samples: Vec::new(),
        }
    }

    fn add(&mut self, labels: &[(&str, &str)], value: u64) {
        let l: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect();
        self.samples.push((l.join(","), value));
    }
}

/// `census` as exposition text.
pub fn render(census: &Census) -> String {
    let mut m = [
        Metric::new(
            "nhbm_device_info",
            "A device node: 1, with its address, arch and state as labels",
        ),
        Metric::new("nhbm_hbm_size_bytes", "Size of an HBM channel"),
        Metric::new(
            "nhbm_hbm_used_bytes",
            "HBM of a channel held by every tenant (root only)",
        ),
        Metric::new(
            "nhbm_process_hbm_bytes",
            "HBM of a channel held by a process's plans",
        ),
        Metric::new(
            "nhbm_process_mapped_bytes",
            "Bytes of a device a process has mapped",
        ),
        Metric::new(
            "nhbm_process_open_files",
            "Open files of a device a process holds",
        ),
        Metric::new(
            "nhbm_process_plans",
            "Live plans a process loaded on a device (root only)",
        ),
        Metric::new(
            "nhbm_hidden_processes",
            "Processes whose open files could not be read",
        ),
    ];
    for d in &census.devices {
        device(&mut m, d);
    }
    m[7].add(&[], u64::from(census.seen.hidden_processes));
    let mut out = String::new();
    for metric in m.iter().filter(|m| !m.samples.is_empty()) {
        let _ = writeln!(out, "# HELP {} {}", metric.name, metric.help);
        let _ = writeln!(out, "# TYPE {} gauge", metric.name);
        for (labels, v) in &metric.samples {
            if labels.is_empty() {
                let _ = writeln!(out, "{} {v}", metric.name);
            } else {
                let _ = writeln!(out, "{}{{{labels}}} {v}", metric.name);
            }
        }
    }
    out
}

/// The samples of device `d` and its holders.
fn device(m: &mut [Metric], d: &DeviceCensus) {
    let (name, addr, arch) = (d.name(), d.address(), format!("v{}", d.arch));
    let state = d.state.as_str();
    let simulated = d.simulated.to_string();
    m[0].add(
        &[
            ("device", &name),
            ("address", &addr),
            ("arch", &arch),
            ("simulated", &simulated),
            ("state", state),
        ],
        1,
    );
    for c in &d.channels {
        let ch = format!("hbm{}", c.channel);
        if let Some(t) = c.total_bytes {
            m[1].add(&[("device", &name), ("channel", &ch)], t);
        }
        if let Some(u) = c.used_bytes {
            m[2].add(&[("device", &name), ("channel", &ch)], u);
        }
    }
    for h in &d.processes {
        holder(m, &name, h);
    }
}

/// The samples of holder `h` of device `name`.
fn holder(m: &mut [Metric], name: &str, h: &Holder) {
    let pid = h.pid.to_string();
    let user = h.user.clone().unwrap_or_else(|| h.uid.to_string());
    let who = [
        ("device", name),
        ("pid", &pid),
        ("command", &h.command),
        ("user", &user),
    ];
    for (c, &b) in h.hbm_bytes.iter().enumerate() {
        let ch = format!("hbm{c}");
        let mut l = who.to_vec();
        l.push(("channel", &ch));
        m[3].add(&l, b);
    }
    m[4].add(&who, h.mapped_bytes);
    m[5].add(&who, u64::from(h.files));
    if let Some(p) = h.plans {
        m[6].add(&who, u64::from(p));
    }
}

/// A label value as the format writes it: `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::census::sample;

    #[test]
    fn every_device_and_holder_has_its_samples() {
        let text = render(&sample::census());
        for want in [
            "# TYPE nhbm_hbm_size_bytes gauge\n",
            "nhbm_device_info{device=\"neuron_hbm0\",address=\"sim:0\",arch=\"v2\",simulated=\"true\",state=\"ready\"} 1\n",
            "nhbm_hbm_size_bytes{device=\"neuron_hbm0\",channel=\"hbm1\"} 17179869184\n",
            "nhbm_hbm_used_bytes{device=\"neuron_hbm0\",channel=\"hbm0\"} 50331648\n",
            "nhbm_process_hbm_bytes{device=\"neuron_hbm0\",pid=\"4242\",command=\"tenant \\\"a\\\"\",user=\"alice\",channel=\"hbm0\"} 33554432\n",
            "nhbm_process_mapped_bytes{device=\"neuron_hbm0\",pid=\"4343\",command=\"tenant-b\",user=\"1001\"} 8192\n",
            "nhbm_process_plans{device=\"neuron_hbm0\",pid=\"4242\",command=\"tenant \\\"a\\\"\",user=\"alice\"} 2\n",
            "nhbm_hidden_processes 3\n",
        ] {
            assert!(text.contains(want), "{want} not in\n{text}");
        }
        // The second device: no access, so no size and no usage.
        assert!(text.contains("state=\"no_access\"} 1\n"));
        assert!(!text.contains("device=\"neuron_hbm1\",channel"));
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    }
}
