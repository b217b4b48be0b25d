print("ß".upper(), "ŉ".upper(), "ﬃ".upper(), "İ".lower(), len("İ".lower()), "Σ".lower(), "ΑΣ".lower())
