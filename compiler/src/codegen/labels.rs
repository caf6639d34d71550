//! Rust variant names for declared labels: `"sea lion"` becomes `SeaLion`, `"3"` becomes `Class3`.

use heck::ToUpperCamelCase;

/// One Rust enum variant name per label, in order, unique, valid as ASCII identifiers.
pub fn label_variants(labels: &[String]) -> Vec<String> {
    let mut variants: Vec<String> = Vec::with_capacity(labels.len());
    for (index, label) in labels.iter().enumerate() {
        // ASCII letters and digits stay, other ASCII separates words, other characters are dropped.
        let ascii: String = label
            .chars()
            .filter_map(|c| match c {
                c if c.is_ascii_alphanumeric() => Some(c),
                c if c.is_ascii() => Some(' '),
                _ => None,
            })
            .collect();
        let mut variant = ascii.to_upper_camel_case();
        if variant.is_empty() {
            variant = format!("Class{index}");
        } else if variant.starts_with(|c: char| c.is_ascii_digit()) {
            variant.insert_str(0, "Class");
        }
        if variant == "Self" {
            variant.push('_');
        }
        while variants.contains(&variant) {
            variant = format!("{variant}{index}");
        }
        variants.push(variant);
    }
    variants
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_become_unique_ascii_variants() {
        let labels: Vec<String> = [
            "dog", "sea lion", "3", "Möwe", "鯨", "t-shirt", "dog!", "Self",
        ]
        .iter()
        .map(|label| label.to_string())
        .collect();
        assert_eq!(
            label_variants(&labels),
            [
                "Dog", "SeaLion", "Class3", "Mwe", "Class4", "TShirt", "Dog6", "Self_"
            ]
        );
    }
}
