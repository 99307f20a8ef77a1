use alloc::vec;
use alloc::vec::Vec;

use super::*;

#[test]
fn names_and_order_follow_llama_cpp() {
    assert_eq!(block_index("blk.12.attn_q.weight"), Some(12));
    assert_eq!(block_index("output.weight"), None);
    assert_eq!(ggml_name(GgmlType::Q4_K), "q4_K");
    assert_eq!(ggml_name(GgmlType::IQ4_XS), "iq4_xs");
    let names = [
        "blk.10.a",
        "token_embd.weight",
        "blk.2.b",
        "blk.2.a",
        "output.weight",
    ];
    let order: Vec<&str> = tensor_order(&names).into_iter().map(|i| names[i]).collect();
    assert_eq!(
        order,
        [
            "output.weight",
            "token_embd.weight",
            "blk.2.a",
            "blk.2.b",
            "blk.10.a"
        ]
    );
    assert_eq!(
        FileType::parse("q4_k_m").unwrap().0,
        FileType::MOSTLY_Q4_K_M
    );
    assert_eq!(FileType::parse("Q4_K").unwrap().1, "Q4_K");
    assert_eq!(FileType::parse("15").unwrap().1, "Q4_K"); // the first name with id 15
    assert!(FileType::parse("Q9_9").is_none());
}

/// A Qwen2.5-0.5B-shaped model (896 columns: not a multiple of 256) in Q4_K_M: the types
/// llama-quantize chose for it.
#[test]
fn q4_k_m_mix_of_a_qwen2_shaped_model() {
    let model = ModelInfo {
        arch: "qwen2".into(),
        n_layer: 24,
        n_head: 14,
        n_head_kv: 2,
        n_expert: 0,
        is_70b: false,
    };
    let mut tensors = vec![
        TensorDesc::new("output.weight", &[896, 151936], GgmlType::F32),
        TensorDesc::new("output_norm.weight", &[896], GgmlType::F32),
        TensorDesc::new("token_embd.weight", &[896, 151936], GgmlType::F32),
    ];
    for l in 0..24 {
        for (n, d) in [
            ("attn_q.weight", [896u64, 896]),
            ("attn_v.weight", [896, 128]),
            ("ffn_down.weight", [4864, 896]),
        ] {
            tensors.push(TensorDesc::new(
                &alloc::format!("blk.{l}.{n}"),
                &d,
                GgmlType::F32,
            ));
        }
    }
    let plan = plan(&MixParams::new(FileType::MOSTLY_Q4_K_M), &model, &tensors).unwrap();
    let ty = |name: &str| plan[tensors.iter().position(|t| t.name == name).unwrap()].target;
    assert_eq!(ty("output.weight"), GgmlType::Q8_0); // 896 % 256: Q8_0 directly
    assert_eq!(ty("output_norm.weight"), GgmlType::F32);
    assert_eq!(ty("token_embd.weight"), GgmlType::Q5_0); // untied: Q4_K, falls back
    assert_eq!(ty("blk.0.attn_q.weight"), GgmlType::Q5_0);
    assert_eq!(ty("blk.0.ffn_down.weight"), GgmlType::Q6_K);
    assert_eq!(ty("blk.3.ffn_down.weight"), GgmlType::Q4_K);
    assert_eq!(ty("blk.4.ffn_down.weight"), GgmlType::Q4_K);
    assert_eq!(ty("blk.5.ffn_down.weight"), GgmlType::Q6_K);
    assert_eq!(ty("blk.23.attn_v.weight"), GgmlType::Q8_0); // Q6_K, falls back
    assert_eq!(ty("blk.4.attn_v.weight"), GgmlType::Q5_0);
    assert_eq!(ty("blk.5.attn_v.weight"), GgmlType::Q8_0);
    assert!(plan[0].fallback_warning.is_none());
    assert!(plan[2].fallback_warning.is_some());
}
