/// Session grants on a fleet (SPEC S16, S44; decision 64): a session grant
/// belongs to the host whose command made it. It ends when its app's last
/// process on that host exits, so only that host's daemon serves it (the
/// others never see the app's processes) and that daemon ends it, with
/// the role its state directory names; a host's role, which may not
/// change grants, can make none.
enum FleetSessions {
    static let migrations: [(name: String, statements: [String])] = [
        (
            "v5-fleet-session-hosts",
            [
                // The host name (`--host-name`) that made a session grant;
                // null for every persistent grant.
                "ALTER TABLE grants ADD COLUMN session_host TEXT",
                // None was made before (refused on a fleet until now):
                // should one exist, no host serves it.
                "UPDATE grants SET session_host = '' WHERE session",
            ]
        )
    ]

}
