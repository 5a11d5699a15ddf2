//! podlink's own kinds (whole DL flits with straddling TL flits, Ethernet frames) round-trip
//! through the library, and bad input is refused with a typed message.

use podlink_host::cli::{self, CliError};
use serde_json::{json, Value};

fn obj(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn flit(b: u8) -> String {
    cli::to_hex(&[b; 64])
}

#[test]
fn dl_flit_stream_round_trips_with_straddling() {
    // 12 TL flits do not fit one 628 B payload: the 10th straddles into the second DL flit.
    let tl: Vec<String> = (1..=12u8).map(flit).collect();
    let input = json!({"seq": 511, "tl_flits": tl, "messages": [
        {"kind": "dl_msg_port_id", "valid": 1, "port_number": 7, "ack": 0},
        {"kind": "dl_msg_vendor_defined_type_length", "vendor_id": 48879, "type": 1, "length": 2}
    ]});
    let bytes = cli::encode("dl_flit", &obj(input)).unwrap();
    assert_eq!(bytes.len(), 2 * 640);
    let out = cli::decode("dl_flit", &bytes).unwrap();
    assert_eq!(out["tl_flits"], json!(tl));
    assert_eq!(out["flits"][0]["flit_seq_no"], json!(511));
    assert_eq!(out["flits"][1]["flit_seq_no"], json!(1), "511 wraps to 1");
    assert_eq!(out["messages"][0]["kind"], json!("dl_msg_port_id"));
    assert_eq!(out["messages"][1]["vendor_id"], json!(48879));

    let mut bad = bytes.clone();
    bad[700] ^= 1;
    assert!(matches!(
        cli::decode("dl_flit", &bad),
        Err(CliError::Wire(_))
    ));
    assert!(cli::decode("dl_flit", &bytes[..639]).is_err());
    assert!(cli::encode("dl_flit", &obj(json!({"tl_flits": ["00"]}))).is_err());
    assert!(cli::encode("dl_flit", &obj(json!({"seq": 0}))).is_err());
}

#[test]
fn eth_frame_round_trips() {
    let input = json!({"dst": 9, "src": 3, "op": "data", "vc": 2, "partition": 5, "psn": 65535,
        "ack_psn": 12, "tl_flits": [flit(0xab), flit(0xcd)]});
    let bytes = cli::encode("eth_frame", &obj(input.clone())).unwrap();
    assert_eq!(bytes.len(), 22 + 128 + 4);
    let out = cli::decode("eth_frame", &bytes).unwrap();
    for k in [
        "dst",
        "src",
        "op",
        "vc",
        "partition",
        "psn",
        "ack_psn",
        "tl_flits",
    ] {
        assert_eq!(out[k], input[k], "{k}");
    }
    let mut bad = bytes.clone();
    bad[30] ^= 0x80;
    assert!(cli::decode("eth_frame", &bad)
        .unwrap_err()
        .to_string()
        .contains("CRC"));
    let ack = cli::encode(
        "eth_frame",
        &obj(json!({"dst": 1, "src": 2, "op": "ack", "ack_psn": 4})),
    )
    .unwrap();
    assert_eq!(
        ack.len(),
        64,
        "a pure ACK is padded to the Ethernet minimum"
    );
    assert!(cli::encode("eth_frame", &obj(json!({"dst": 1024, "src": 2}))).is_err());
}

#[test]
fn message_kind_mismatch_is_refused() {
    // A device-ID word decoded as a port-number kind.
    let b = cli::parse_hex("a1550140").unwrap();
    assert!(cli::decode("dl_msg_port_id", &b).is_err());
    assert!(cli::encode("dl_msg_device_id", &obj(json!({"mtype": 6}))).is_err());
    assert!(cli::encode("dl_msg_no_op", &obj(json!({"compressed": 1}))).is_err());
    assert!(cli::encode(
        "dl_msg_uart_stream_transport",
        &obj(json!({"length": 2, "payload_dwords": [1]}))
    )
    .is_err());
}

#[test]
fn tl_flit_items_round_trip() {
    let data = cli::to_hex(&(0..256).map(|i| (i % 251) as u8 + 1).collect::<Vec<_>>());
    let input = json!({"items": [
        {"kind": "tl_uncompressed_request", "cmd": 41, "tag": 5, "len": 63, "addr": 64,
         "srcaccid": 1, "dstaccid": 2, "numbeats": 3, "attr": 255, "data": data},
        {"kind": "tl_uncompressed_request", "cmd": 3, "tag": 6, "len": 15, "addr": 128,
         "srcaccid": 1, "dstaccid": 2},
        {"kind": "credits", "req_cmd": 2, "rsp_cmd": 0, "req_data": 4, "rsp_data": 0},
        {"kind": "message", "message": "tl_msg_initial_credit_release_complete"}
    ]});
    let bytes = cli::encode("tl_flit", &obj(input.clone())).unwrap();
    assert_eq!(bytes.len() % 64, 0);
    assert!(bytes.len() >= 5 * 64, "256 B of data alone is 4 flits");
    let out = cli::decode("tl_flit", &bytes).unwrap();
    let items = out["items"].as_array().unwrap();
    assert_eq!(items.len(), 4, "{out:?}");
    assert_eq!(items[0]["data"], input["items"][0]["data"]);
    assert_eq!(items[0]["kind"], json!("tl_uncompressed_request"));
    assert_eq!(items[1]["tag"], json!(6));
    assert_eq!(items[2]["kind"], json!("credits"));
    assert_eq!(items[2]["req_data"], json!(4));
    assert_eq!(
        items[3]["message"],
        json!("tl_msg_initial_credit_release_complete")
    );
    assert_eq!(out["in_transfer"], json!(false));
    // A write-full without its data is refused.
    let bad = json!({"items": [{"kind": "tl_uncompressed_request", "cmd": 41, "len": 63}]});
    assert!(cli::encode("tl_flit", &obj(bad)).is_err());
    assert!(cli::decode("tl_flit", &bytes[..63]).is_err());
}
