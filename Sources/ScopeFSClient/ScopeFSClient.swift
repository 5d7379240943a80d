// Filled in by the client-library work (SPEC S31).
