//! The `nhbm` program as a user runs it, without a device: version, exit
//! statuses, errors in text and JSON, `plan` (one planner or all, for an
//! arch, with a picture, of an ONNX model with input shapes, of buffers in
//! MiniMalloc's CSV format), plan files
//! that are not plans, the generated completions and manual page, and
//! `monitor --listen` serving Prometheus's text over HTTP.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

/// A scratch directory for one test, removed when dropped.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("nhbm-cli-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `nhbm` with `args` in `dir`.
fn nhbm(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nhbm"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The example models.
fn example(name: &str) -> String {
    format!("{}/../examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// A model on the third and fourth channels, which V2 does not have.
const HIGH_CHANNELS: &str = include_str!("high_channels.json");

#[test]
fn version() {
    let d = Dir::new("version");
    for flag in ["--version", "-V"] {
        let o = nhbm(&d.0, &[flag]);
        assert!(o.status.success());
        assert_eq!(
            stdout(&o).trim(),
            format!("nhbm {}", env!("CARGO_PKG_VERSION"))
        );
    }
}

#[test]
fn a_missing_device_exits_3_with_how_to_load_the_module() {
    let d = Dir::new("nodev");
    let node = d.join("neuron_hbm9");
    let node = node.to_str().unwrap();
    let o = nhbm(&d.0, &["info", "-d", node]);
    assert_eq!(o.status.code(), Some(3));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("nhbm: cannot open {node}: ENOENT")),
        "{err}"
    );
    assert!(
        err.contains("modprobe neuron_hbm") && err.contains("ls /dev/neuron_hbm*"),
        "{err}"
    );
    // Under --json the same failure is one object on stdout.
    let o = nhbm(&d.0, &["stats", "--json", "-d", node]);
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["errno"], "ENOENT");
    assert_eq!(v["exit_code"], 3);
    assert!(v["error"].as_str().unwrap().contains(node));
    assert!(v["hint"].as_str().unwrap().contains("insmod neuron_hbm.ko"));
    // plan -d opens the device the same way.
    let o = nhbm(&d.0, &["plan", &example("small_cnn.json"), "-d", node]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
}

#[test]
fn usage_errors_exit_2_also_as_json() {
    let d = Dir::new("usage");
    let o = nhbm(&d.0, &["plan"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("Usage"), "{}", stderr(&o));
    let o = nhbm(&d.0, &["--json", "plan", "m.json", "--bogus"]);
    assert_eq!(o.status.code(), Some(2));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["exit_code"], 2);
    assert!(v["error"].as_str().unwrap().contains("--bogus"), "{v}");
    let o = nhbm(&d.0, &["--help"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("Exit status:"));
}

/// What `validate` says of files that are not plans: what they are, and
/// exit status 5; never "rsvd is not zero".
#[test]
fn files_that_are_not_plans_are_named() {
    let d = Dir::new("notplan");
    std::fs::write(d.join("text.plan"), "a plan, honestly\n".repeat(20)).unwrap();
    std::fs::write(d.join("m.onnx"), b"\x08\x08\x12\x09nhbm-onnx").unwrap();
    let model = example("small_cnn.json");
    for (file, want) in [
        (model.as_str(), "a model description, not a plan"),
        ("text.plan", "a text file, not a plan"),
        ("m.onnx", "an ONNX model, not a plan"),
    ] {
        let o = nhbm(&d.0, &["validate", file]);
        assert_eq!(o.status.code(), Some(5), "{file}");
        let err = stderr(&o);
        assert!(err.contains(want) && !err.contains("rsvd"), "{file}: {err}");
    }
    let o = nhbm(&d.0, &["-j", "validate", "text.plan"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (v["exit_code"].as_u64(), v["errno"].is_null()),
        (Some(5), true)
    );
}

/// `plan` runs the planner asked for (exact by default), or all of them
/// with --compare; the plans written are the same either way.
#[test]
fn plan_runs_one_planner_unless_asked_to_compare() {
    let d = Dir::new("compare");
    let model = example("transformer_block.json");
    let o = nhbm(&d.0, &["plan", &model, "-o", "one", "--svg", "tb.svg"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("planner exact"), "{out}");
    assert!(out.contains("proven optimal"), "{out}");
    assert!(
        !out.contains("greedy_by_size") && !out.contains("hill_climb"),
        "{out}"
    );
    let svg = std::fs::read_to_string(d.join("tb.svg")).unwrap();
    assert!(svg.starts_with("<?xml") && svg.contains("class=\"lower-bound\""));
    let o = nhbm(&d.0, &["plan", &model, "--compare", "-o", "all", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let planners: Vec<&str> = v["planners"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["planner"].as_str().unwrap())
        .collect();
    assert_eq!(
        planners,
        ["greedy", "greedy_by_size", "hill_climb", "exact"]
    );
    assert_eq!(v["report"]["planner"], "exact");
    for m in ["hbm0", "hbm1"] {
        let one = std::fs::read(d.join(&format!("one.{m}.plan"))).unwrap();
        let all = std::fs::read(d.join(&format!("all.{m}.plan"))).unwrap();
        assert_eq!(one, all, "{m}");
    }
    let o = nhbm(&d.0, &["plan", &model, "--planner", "greedy", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["planners"].as_array().unwrap().len(), 1);
    assert_eq!(v["planners"][0]["planner"], "greedy");
}

/// `plan` takes buffers in MiniMalloc's CSV format as it takes a model
/// description: sizes in bytes, lifetimes half-open; one memory.
#[test]
fn plan_takes_a_minimalloc_csv() {
    let d = Dir::new("csv");
    // 0 over 0..10, 1 over 10..30, 2 over 5..30: at most 5,000 bytes live
    // at once (1 and 2), and a packing of that many.
    let csv = "id,lower,upper,size\n0,0,10,2000\n1,10,30,1000\n2,5,30,3000\n";
    std::fs::write(d.join("trace.csv"), csv).unwrap();
    let o = nhbm(&d.0, &["plan", "trace.csv", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["report"]["liveness_lower_bound"], 5000);
    assert_eq!(v["report"]["scratch_high_water_mark"], 5000);
    assert!(d.join("trace.hbm0.plan").exists());
    std::fs::write(d.join("bad.csv"), "id,lower,upper,size\n0,5,5,10\n").unwrap();
    let o = nhbm(&d.0, &["plan", "bad.csv"]);
    assert_eq!(o.status.code(), Some(5), "{}", stderr(&o));
    assert!(stderr(&o).contains("bad.csv"), "{}", stderr(&o));
}

/// The exact planner's --budget bounds its search in nodes: the same
/// budget gives the same bytes, and the outcome says the budget stopped it.
#[test]
fn plan_budget_is_reported_and_reproducible() {
    let d = Dir::new("budget");
    let (m, _) = nhbm_planner::hard::instance(100, 4);
    std::fs::write(d.join("hard.json"), serde_json::to_string(&m.desc).unwrap()).unwrap();
    let run = |prefix: &str| {
        let o = nhbm(
            &d.0,
            &[
                "plan",
                "hard.json",
                // hill_climb without its moves leaves exact a search.
                "--iterations",
                "0",
                "--budget",
                "300",
                "-o",
                prefix,
                "--json",
            ],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        let mem = v["planners"][0]["memories"][0].clone();
        (
            std::fs::read(d.join(&format!("{prefix}.hbm0.plan"))).unwrap(),
            mem,
        )
    };
    let (a, mem_a) = run("a");
    let (b, mem_b) = run("b");
    assert_eq!(a, b);
    assert_eq!(mem_a["stopped"], "node_budget");
    assert_eq!(mem_a["nodes"], 301);
    assert_eq!(mem_a["nodes"], mem_b["nodes"]);
    let o = nhbm(
        &d.0,
        &[
            "plan",
            "hard.json",
            "--iterations",
            "0",
            "--budget",
            "300",
            "-o",
            "c",
        ],
    );
    assert!(
        stdout(&o).contains("not proven (node budget hit, 301 nodes)"),
        "{}",
        stdout(&o)
    );
}

/// hbm2 and hbm3 are channels of V3 and V4: the model is checked against
/// --arch, not against V2 first.
#[test]
fn plan_for_an_arch_with_more_channels() {
    let d = Dir::new("arch");
    std::fs::write(d.join("high.json"), HIGH_CHANNELS).unwrap();
    for arch in ["v3", "v4"] {
        let o = nhbm(&d.0, &["plan", "high.json", "--arch", arch, "-o", arch]);
        assert!(o.status.success(), "{arch}: {}", stderr(&o));
        assert!(stdout(&o).contains(&format!("target {arch}: 4 channels")));
        for m in ["hbm2", "hbm3"] {
            assert!(d.join(&format!("{arch}.{m}.plan")).exists(), "{arch} {m}");
        }
    }
    let o = nhbm(&d.0, &["plan", "high.json", "--arch", "v2"]);
    assert_eq!(o.status.code(), Some(5));
    assert!(
        stderr(&o).contains("hbm2 is not a channel of v2"),
        "{}",
        stderr(&o)
    );
}

#[cfg(feature = "onnx")]
#[test]
fn onnx_input_shapes_fix_symbolic_dimensions() {
    use prost::Message;
    let d = Dir::new("onnx");
    let bytes = nhbm_onnx::gen::small_cnn(None).encode_to_vec();
    std::fs::write(d.join("cnn.onnx"), bytes).unwrap();
    let o = nhbm(&d.0, &["plan", "cnn.onnx"]);
    assert_eq!(o.status.code(), Some(5));
    assert!(
        stderr(&o).contains("hint: give graph inputs"),
        "{}",
        stderr(&o)
    );
    let o = nhbm(
        &d.0,
        &["plan", "cnn.onnx", "--input-shape", "x=2,3,8,8", "--json"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let x = v["plan"]["tensor_allocs"]["x"]["size"].as_u64();
    assert_eq!(x, Some(2 * 3 * 8 * 8 * 4));
    let o = nhbm(&d.0, &["plan", "cnn.onnx", "--input-shape", "z=1"]);
    assert_eq!(o.status.code(), Some(5));
    assert!(
        stderr(&o).contains("input shape z: no such graph input"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn completions_and_manpage_are_generated() {
    let d = Dir::new("gen");
    for shell in ["bash", "zsh", "fish"] {
        let o = nhbm(&d.0, &["completions", shell]);
        assert!(o.status.success());
        let out = stdout(&o);
        for word in ["plan", "validate", "stats"] {
            assert!(out.contains(word), "{shell}: {word}");
        }
    }
    let o = nhbm(&d.0, &["manpage"]);
    assert!(o.status.success());
    let man = stdout(&o);
    assert!(man.contains(".TH nhbm 1") && man.contains("plan") && man.contains("Exit status"));
}

/// `GET path` from the server at `addr`: the status line and the body.
fn http_get(addr: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

#[test]
fn monitor_serves_prometheus_text_on_loopback_only() {
    use std::io::BufRead;
    let d = Dir::new("listen");
    // Refused at once, not served.
    let mut wild = Command::new(env!("CARGO_BIN_EXE_nhbm"))
        .args(["monitor", "--prometheus", "--listen", "0.0.0.0:0"])
        .current_dir(&d.0)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let refused = (0..50).find_map(|_| {
        std::thread::sleep(std::time::Duration::from_millis(100));
        wild.try_wait().unwrap()
    });
    if refused.is_none() {
        wild.kill().unwrap();
    }
    let o = wild.wait_with_output().unwrap();
    assert_eq!(refused.and_then(|s| s.code()), Some(1));
    assert!(
        stderr(&o).contains("not a loopback address"),
        "{}",
        stderr(&o)
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_nhbm"))
        .args(["monitor", "--prometheus", "--listen", "127.0.0.1:0"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("nhbm: serving http://")
        .and_then(|a| a.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    let (status, body) = http_get(&addr, "/metrics");
    let (missing, _) = http_get(&addr, "/");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(status.contains(" 200"), "{status}");
    assert!(missing.contains(" 404"), "{missing}");
    // Every host has the count of processes it could not look at.
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_string()))).unwrap();
    assert!(
        scrape
            .samples
            .iter()
            .any(|s| s.metric == "nhbm_hidden_processes"),
        "{body}"
    );
}
