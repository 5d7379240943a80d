import Policy
import Testing

/// `RelativePath.nextComponent`: which entry of a folder leads to a newly
/// granted item (its cached miss is dropped, issue 21).
struct NextComponentTests {
    @Test func nextComponentBelowTheRoot() {
        #expect(RelativePath.nextComponent(of: "a/b/c", after: "") == "a")
    }

    @Test func nextComponentBelowAFolder() {
        #expect(RelativePath.nextComponent(of: "a/b/c", after: "a") == "b")
        #expect(RelativePath.nextComponent(of: "a/b/c", after: "a/b") == "c")
    }

    @Test func noneForThePathItselfOrOutside() {
        #expect(RelativePath.nextComponent(of: "a/b", after: "a/b") == nil)
        #expect(RelativePath.nextComponent(of: "a/b", after: "a/c") == nil)
        #expect(RelativePath.nextComponent(of: "ab/c", after: "a") == nil)
        #expect(RelativePath.nextComponent(of: "", after: "") == nil)
    }

    @Test func comparedByBytes() {
        // "é" precomposed vs "e" + combining acute: two names (SPEC S33a).
        #expect(RelativePath.nextComponent(of: "caf\u{E9}/x", after: "cafe\u{301}") == nil)
        #expect(RelativePath.nextComponent(of: "cafe\u{301}/x", after: "cafe\u{301}") == "x")
    }
}
