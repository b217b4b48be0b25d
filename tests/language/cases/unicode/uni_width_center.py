print("中".center(5, "-"), len("中".center(5)), f"{'中文':>6}|")
