for s in ["it's", 'say "hi"', "both ' \"", "tab\there", "nul\x00", "\x7f\x80", "é", "\u200b", "\U0001F600", "\\"]:
    print(repr(s), ascii(s))
