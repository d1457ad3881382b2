//! RocketMQ version ordinals as they travel in the `version` header field.
//!
//! The field carries the ordinal of Java's `MQVersion.Version` enum, not a semantic version.
//! Only the ordinals that change server behaviour are named here.

/// `V3_4_9`: from here on the client's max-reconsume header is honoured.
pub const V3_4_9: i32 = 121;
/// `V4_0_0`.
pub const V4_0_0: i32 = 213;
/// `V4_9_3`: the last clients that added QUERY_MESSAGE's `_UNIQUE_KEY_QUERY` after signing.
pub const V4_9_3: i32 = 400;
/// `V4_9_4`: from here on the name server answers routes in standard JSON.
pub const V4_9_4: i32 = 401;
/// `V5_0_0`: compressed broker registrations carry queue mappings from here on.
pub const V5_0_0: i32 = 413;
/// `V5_3_1`: clients above this understand `GO_AWAY`.
pub const V5_3_1: i32 = 475;
/// `V5_3_3`: the version FerroMQ reports as its own.
pub const V5_3_3: i32 = 479;

/// The version FerroMQ puts in the commands it sends.
pub const CURRENT: i32 = V5_3_3;

/// Java's `MQVersion.getVersionDesc`: the name of a version ordinal (`479` is `V5_3_3`),
/// `HIGHER_VERSION` past the last one Java knows. The ordinals follow the enum's layout:
/// sixteen 3.0.0 pre-releases, then a `_SNAPSHOT` and a release per patch (3.0.1-3.0.15,
/// 3.1.x and 3.2.x from .0, 3.3-3.9 from .1, 4.x and 5.x from .0, up to 5.9.9).
pub fn name(ordinal: i32) -> String {
    const FIRST: [&str; 16] = [
        "V3_0_0_SNAPSHOT",
        "V3_0_0_ALPHA1",
        "V3_0_0_BETA1",
        "V3_0_0_BETA2",
        "V3_0_0_BETA3",
        "V3_0_0_BETA4",
        "V3_0_0_BETA5",
        "V3_0_0_BETA6_SNAPSHOT",
        "V3_0_0_BETA6",
        "V3_0_0_BETA7_SNAPSHOT",
        "V3_0_0_BETA7",
        "V3_0_0_BETA8_SNAPSHOT",
        "V3_0_0_BETA8",
        "V3_0_0_BETA9_SNAPSHOT",
        "V3_0_0_BETA9",
        "V3_0_0_FINAL",
    ];
    let Ok(mut i) = usize::try_from(ordinal) else { return "V3_0_0_SNAPSHOT".to_owned() };
    if let Some(n) = FIRST.get(i) {
        return (*n).to_owned();
    }
    i -= FIRST.len();
    // (major, minor, first patch, last patch) runs, in the enum's order.
    let mut runs = vec![(3, 0, 1, 15), (3, 1, 0, 9), (3, 2, 0, 9)];
    runs.extend((3..=9).map(|minor| (3, minor, 1, 9)));
    runs.extend((4..=5).flat_map(|major| (0..=9).map(move |minor| (major, minor, 0, 9))));
    for (major, minor, first, last) in runs {
        let len = 2 * (last - first + 1);
        if i < len {
            let patch = first + i / 2;
            let snapshot = if i % 2 == 0 { "_SNAPSHOT" } else { "" };
            return format!("V{major}_{minor}_{patch}{snapshot}");
        }
        i -= len;
    }
    "HIGHER_VERSION".to_owned()
}

/// Java's `MQVersion.Version.valueOf(name).ordinal()`: the ordinal of a version name such as
/// `V5_0_0` (as [`name`] spells it); `None` for a name Java's enum does not have.
pub fn ordinal(version_name: &str) -> Option<i32> {
    if !version_name.starts_with('V') && version_name != "HIGHER_VERSION" {
        return None;
    }
    // The enum has fewer than 1,000 constants; past the last, `name` says HIGHER_VERSION.
    (0..1_000).find(|&i| name(i) == version_name)
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_give_their_ordinals_back() {
        for i in [0, 15, 28, 213, 413, 479] {
            assert_eq!(super::ordinal(&super::name(i)), Some(i));
        }
        assert_eq!(super::ordinal("V5_0_0"), Some(super::V5_0_0));
        assert_eq!(super::ordinal("5.0.0"), None, "a gRPC client's version string is not a name");
        assert_eq!(super::ordinal("V9_9_9"), None);
    }

    #[test]
    fn ordinals_name_javas_versions() {
        assert_eq!(super::name(0), "V3_0_0_SNAPSHOT");
        assert_eq!(super::name(15), "V3_0_0_FINAL");
        assert_eq!(super::name(28), "V3_0_7_SNAPSHOT");
        assert_eq!(super::name(62), "V3_1_8_SNAPSHOT");
        assert_eq!(super::name(super::V3_4_9), "V3_4_9");
        assert_eq!(super::name(super::V4_0_0), "V4_0_0");
        assert_eq!(super::name(super::V4_9_4), "V4_9_4");
        assert_eq!(super::name(super::V5_0_0), "V5_0_0");
        assert_eq!(super::name(super::V5_3_1), "V5_3_1");
        assert_eq!(super::name(super::V5_3_3), "V5_3_3");
        assert_eq!(super::name(611), "V5_9_9");
        assert_eq!(super::name(612), "HIGHER_VERSION");
        assert_eq!(super::name(9999), "HIGHER_VERSION");
    }
}
