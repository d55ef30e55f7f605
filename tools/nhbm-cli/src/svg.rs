//! `nhbm plan --svg`: the placement as a picture. One panel per memory with
//! scratch tensors: time (operator index) across, offset in the arena up,
//! one rectangle per scratch tensor (its title names it), the liveness
//! lower bound and the high-water mark as horizontal lines. Hand-written
//! SVG 1.1.

use std::fmt::Write;

use nhbm_planner::planner::memory_lower_bounds;
use nhbm_planner::{MemoryPlan, MemoryType, Model};

/// Width of the operators' columns together, in pixels, at least.
const TIMELINE: f64 = 480.0;
/// Width of one operator's column, in pixels, at least.
const COLUMN: f64 = 4.0;
/// Room right of a panel for the lines' labels, in pixels.
const LABELS: f64 = 200.0;
/// Height of a panel's arena, in pixels.
const HEIGHT: f64 = 240.0;
/// Room around each panel for its labels, in pixels.
const MARGIN: f64 = 40.0;

/// One panel: a memory, its arena's bytes, and where it is drawn.
struct Panel {
    memory: MemoryType,
    /// The bytes the panel's height stands for.
    scale: u64,
    /// The y of the panel's offset 0 (its bottom).
    bottom: f64,
}

impl Panel {
    /// The y of `offset` bytes in this panel.
    fn y(&self, offset: u64) -> f64 {
        self.bottom - offset as f64 * HEIGHT / self.scale as f64
    }
}

/// The picture of `mp`, the plan of `model`.
pub fn placement(model: &Model, mp: &MemoryPlan) -> String {
    let bounds = memory_lower_bounds(model, mp);
    let ops = model.desc.operators.len().max(1) as f64;
    let width = MARGIN + ops * column(ops) + LABELS;
    let panels: Vec<Panel> = mp
        .arena_usages
        .iter()
        .enumerate()
        .map(|(i, (&memory, a))| {
            let lb = bounds.get(&memory).copied().unwrap_or(0);
            Panel {
                memory,
                scale: a.total_size.max(lb).max(1),
                bottom: MARGIN + i as f64 * (HEIGHT + 2.0 * MARGIN) + HEIGHT,
            }
        })
        .collect();
    let height = panels.len().max(1) as f64 * (HEIGHT + 2.0 * MARGIN);
    let mut s = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{width}\" \
         height=\"{height}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <title>{}: scratch placement</title>\n",
        escape(model.name())
    );
    for p in &panels {
        panel(
            &mut s,
            model,
            mp,
            p,
            bounds.get(&p.memory).copied().unwrap_or(0),
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Draws panel `p`: its tensors, lower bound `lb` and high-water mark.
fn panel(s: &mut String, model: &Model, mp: &MemoryPlan, p: &Panel, lb: u64) {
    let ops = model.desc.operators.len().max(1) as f64;
    let col = column(ops);
    let right = MARGIN + ops * col;
    let hwm = mp.arena_usages[&p.memory].total_size;
    let _ = writeln!(s, "<g id=\"{}\" class=\"memory\">", p.memory);
    let _ = writeln!(
        s,
        "<text x=\"{MARGIN}\" y=\"{}\">{}: {} operators across, offset up</text>",
        p.y(p.scale) - 8.0,
        p.memory,
        ops
    );
    let _ = writeln!(
        s,
        "<rect class=\"arena\" x=\"{MARGIN}\" y=\"{}\" width=\"{}\" height=\"{HEIGHT}\" \
         fill=\"none\" stroke=\"#999\"/>",
        p.y(p.scale),
        ops * col
    );
    for t in model.tensors.iter().filter(|t| t.is_packed_scratch()) {
        let (Ok(a), Some(l)) = (mp.get_allocation(t.id()), t.lifetime.as_ref()) else {
            continue;
        };
        if a.memory != p.memory {
            continue;
        }
        let top = p.y(a.offset + a.size);
        let _ = writeln!(
            s,
            "<rect class=\"buffer\" x=\"{}\" y=\"{top}\" width=\"{}\" height=\"{}\" \
             fill=\"{}\" stroke=\"#333\" stroke-width=\"0.5\"><title>{}: {} bytes at {:#x}, \
             operators {}..{}</title></rect>",
            MARGIN + l.start_op as f64 * col,
            (l.end_op - l.start_op + 1) as f64 * col,
            p.y(a.offset) - top,
            colour(t.id()),
            escape(t.id()),
            a.size,
            a.offset,
            l.start_op,
            l.end_op
        );
    }
    for (class, bytes, colour) in [("lower-bound", lb, "#c00"), ("high-water", hwm, "#06c")] {
        let y = p.y(bytes);
        let _ = writeln!(
            s,
            "<line class=\"{class}\" x1=\"{MARGIN}\" y1=\"{y}\" x2=\"{right}\" y2=\"{y}\" \
             stroke=\"{colour}\" stroke-dasharray=\"4 2\"/>\n\
             <text x=\"{}\" y=\"{}\" fill=\"{colour}\">{}: {bytes} bytes</text>",
            right + 4.0,
            y + 4.0,
            class.replace('-', " ")
        );
    }
    s.push_str("</g>\n");
}

/// The width of one of `ops` operators' columns: the timeline spread over
/// [`TIMELINE`] pixels, each column at least [`COLUMN`].
fn column(ops: f64) -> f64 {
    (TIMELINE / ops).floor().max(COLUMN)
}

/// A fill colour of its own for each tensor, from its name.
fn colour(id: &str) -> String {
    let h = id.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    format!("hsl({}, 60%, 70%)", h % 360)
}

/// `text` with XML's special characters escaped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nhbm_planner::{plan, MemoryPlannerType, PlannerOptions};

    /// Two memories; `b<&>` needs escaping. Scratch: a (0..1), b (1..2), c
    /// (2..3) in hbm0, d (0..2) pinned to hbm1.
    fn model() -> Model {
        Model::from_json(
            r#"{"name": "pic", "memories": [{"name": "hbm0"}, {"name": "hbm1"}],
            "tensors": [
              {"id": "x", "size": 64, "io": "input"},
              {"id": "a", "size": 256}, {"id": "b<&>", "size": 512},
              {"id": "c", "size": 128}, {"id": "d", "size": 1024, "memory": "hbm1"},
              {"id": "y", "size": 64, "io": "output"}
            ],
            "operators": [
              {"name": "0", "uses": ["x"], "defines": ["a", "d"]},
              {"name": "1", "uses": ["a"], "defines": ["b<&>"]},
              {"name": "2", "uses": ["b<&>", "d"], "defines": ["c"]},
              {"name": "3", "uses": ["c"], "defines": ["y"]}
            ]}"#,
        )
        .unwrap()
    }

    fn attr(n: roxmltree::Node, name: &str) -> f64 {
        n.attribute(name).unwrap().parse().unwrap()
    }

    #[test]
    fn the_picture_has_a_rectangle_per_tensor_and_the_bounds() {
        let m = model();
        let mp = plan(
            &m,
            MemoryPlannerType::GreedyBySize,
            &PlannerOptions::default(),
        )
        .unwrap();
        let svg = placement(&m, &mp);
        let doc = roxmltree::Document::parse(&svg).expect("well-formed XML");
        let groups: Vec<_> = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("memory"))
            .collect();
        assert_eq!(groups.len(), 2);
        let bounds = memory_lower_bounds(&m, &mp);
        let mut titles = Vec::new();
        for g in &groups {
            let memory: MemoryType = g.attribute("id").unwrap().parse().unwrap();
            let of = |class: &str| -> Vec<roxmltree::Node> {
                g.descendants()
                    .filter(|n| n.attribute("class") == Some(class))
                    .collect()
            };
            let arena = of("arena")[0];
            let bottom = attr(arena, "y") + attr(arena, "height");
            let hwm = mp.arena_usages[&memory].total_size;
            let scale = hwm.max(bounds[&memory]);
            let y_of = |bytes: u64| bottom - bytes as f64 * HEIGHT / scale as f64;
            let lb = of("lower-bound")[0];
            assert_eq!(attr(lb, "y1"), y_of(bounds[&memory]), "{memory}");
            assert_eq!(attr(lb, "y1"), attr(lb, "y2"));
            assert_eq!(attr(of("high-water")[0], "y1"), y_of(hwm));
            for r in of("buffer") {
                let title = r.first_element_child().unwrap().text().unwrap().to_string();
                let id = title.split(':').next().unwrap();
                let a = mp.get_allocation(id).unwrap();
                assert_eq!(a.memory, memory);
                assert_eq!(attr(r, "y"), y_of(a.offset + a.size), "{id}");
                titles.push(title);
            }
        }
        // One rectangle per scratch tensor, named (and unescaped by the parser).
        titles.sort();
        let ids: Vec<&str> = titles
            .iter()
            .map(|t| t.split(':').next().unwrap())
            .collect();
        assert_eq!(ids, ["a", "b<&>", "c", "d"]);
        assert!(svg.contains("b&lt;&amp;&gt;"));
    }
}
