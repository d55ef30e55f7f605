//! What a file given as a plan holds, when it is not a plan: a model
//! description, an ONNX model, other JSON, text, or bytes whose header
//! cannot be a plan's. The blob has no magic number, so a blob is
//! recognized by its shape: a record count the file has room for, and a
//! first record of a known type.

use nhbm::uapi::{MAX_PLAN_RECORDS, MEM_REF_SIZE, MR_REMOTE, MR_SB, PLAN_HEADER_SIZE};

/// What a plan file holds, as far as its bytes tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Content {
    /// A plan's JSON form (or JSON too broken to tell: its parser says why).
    PlanJson,
    /// Bytes shaped like a plan blob (its rules are checked after).
    PlanBlob,
    /// A model description: `nhbm plan` takes it.
    ModelJson,
    /// An ONNX model: `nhbm plan` takes it.
    Onnx,
    /// JSON that is neither a plan nor a model.
    OtherJson,
    /// Text.
    Text,
    /// Bytes that are no plan blob, and why.
    NotABlob(String),
}

/// What the file `path` with contents `bytes` holds.
pub fn content(path: &str, bytes: &[u8]) -> Content {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    if matches!(first, Some(b'{' | b'[')) {
        return match serde_json::from_slice::<serde_json::Value>(bytes) {
            Ok(v) if v.get("records").is_some() => Content::PlanJson,
            Ok(v) if v.get("tensors").is_some() && v.get("operators").is_some() => {
                Content::ModelJson
            }
            Ok(_) => Content::OtherJson,
            Err(_) => Content::PlanJson,
        };
    }
    match blob_shape(bytes) {
        Ok(()) => Content::PlanBlob,
        Err(_) if is_onnx(path, bytes) => Content::Onnx,
        Err(_) if is_text(bytes) => Content::Text,
        Err(why) => Content::NotABlob(why),
    }
}

/// Why a file that is not a plan is not one, naming what it is; `None` for
/// what may be a plan.
pub fn not_a_plan(path: &str, c: &Content) -> Option<String> {
    let makes = format!("`nhbm plan {path}` makes plans of it");
    let what = match c {
        Content::PlanJson | Content::PlanBlob => return None,
        Content::ModelJson => format!("a model description, not a plan: {makes}"),
        Content::Onnx => format!("an ONNX model, not a plan: {makes}"),
        Content::OtherJson => "JSON without \"records\": not a plan".to_string(),
        Content::Text => "a text file, not a plan".to_string(),
        Content::NotABlob(why) => format!("not a plan blob: {why}"),
    };
    Some(format!(
        "{path}: {what} (a plan is a blob or its JSON form, as `nhbm plan` writes them)"
    ))
}

/// Whether `bytes` have a plan blob's shape; else why not.
fn blob_shape(bytes: &[u8]) -> Result<(), String> {
    let u32_at = |off: usize| u32::from_le_bytes(bytes[off..off + 4].try_into().unwrap());
    if bytes.len() < PLAN_HEADER_SIZE + MEM_REF_SIZE {
        return Err(format!(
            "{} bytes, shorter than a header and one record ({} bytes)",
            bytes.len(),
            PLAN_HEADER_SIZE + MEM_REF_SIZE
        ));
    }
    // struct nhbm_plan_header: two u64 sizes, then nmem.
    let nmem = u32_at(16);
    let room = (bytes.len() - PLAN_HEADER_SIZE) / MEM_REF_SIZE;
    if nmem == 0 || nmem > MAX_PLAN_RECORDS || nmem as usize > room {
        return Err(format!(
            "its header counts {nmem} records, the file has room for {room}"
        ));
    }
    let mr_type = u32_at(PLAN_HEADER_SIZE);
    if !(MR_SB..=MR_REMOTE).contains(&mr_type) {
        return Err(format!(
            "its first record has type {mr_type}, no record type"
        ));
    }
    Ok(())
}

/// An ONNX model: named so, or a protobuf that starts as a ModelProto does
/// (field 1, `ir_version`, a small varint).
fn is_onnx(path: &str, bytes: &[u8]) -> bool {
    let named = std::path::Path::new(path)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"));
    named || matches!(bytes, [0x08, 1..=32, ..])
}

/// UTF-8 without control characters other than whitespace.
fn is_text(bytes: &[u8]) -> bool {
    std::str::from_utf8(bytes)
        .is_ok_and(|s| !s.chars().any(|c| c.is_control() && !c.is_whitespace()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nhbm::{Kind, Plan, Record};

    fn blob() -> Vec<u8> {
        let mut p = Plan::new(0, 0);
        p.records.push(Record::new(1, Kind::Buffer, 64));
        p.to_blob().unwrap()
    }

    #[test]
    fn plans_are_plans() {
        assert_eq!(content("p.plan", &blob()), Content::PlanBlob);
        assert_eq!(content("p.json", b" {\"records\": []}"), Content::PlanJson);
        // Broken JSON goes to the JSON reader, which says where it breaks.
        assert_eq!(content("p.json", b"{\"records\": ["), Content::PlanJson);
        assert_eq!(not_a_plan("p", &Content::PlanBlob), None);
    }

    /// A blob with a bad reserved field is still a plan: its rules name
    /// the field.
    #[test]
    fn a_plan_with_a_broken_field_is_left_to_the_rules() {
        let mut b = blob();
        b[20] = 1; // header rsvd
        assert_eq!(content("p.plan", &b), Content::PlanBlob);
    }

    #[test]
    fn what_is_not_a_plan_is_named() {
        let model = br#"{"name": "m", "tensors": [], "operators": []}"#;
        let cases: [(&str, &[u8], &str); 6] = [
            (
                "m.json",
                model,
                "a model description, not a plan: `nhbm plan m.json`",
            ),
            ("m.bin", b"\x08\x08\x12\x09nhbm-onnx", "an ONNX model"),
            ("x.json", b"[1, 2]", "JSON without \"records\""),
            ("a.txt", &[b'x'; 400], "a text file"),
            ("z.bin", &[0xffu8; 400], "header counts 4294967295 records"),
            ("s.bin", &[0u8; 10], "10 bytes, shorter than"),
        ];
        for (path, bytes, want) in cases {
            let msg = not_a_plan(path, &content(path, bytes)).unwrap();
            assert!(msg.contains(want), "{path}: {msg}");
            assert!(!msg.contains("rsvd"), "{msg}");
        }
        let mut b = blob();
        b[PLAN_HEADER_SIZE] = 99;
        let msg = not_a_plan("t", &content("t", &b)).unwrap();
        assert!(msg.contains("first record has type 99"), "{msg}");
    }
}
