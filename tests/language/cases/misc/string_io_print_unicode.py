print("snow ☃ check ✓ emoji 😀 cjk 中文 rtl עברית combining e\u0301")
