import textwrap
block = """
    def f():
        return 1
    """
print(repr(textwrap.dedent(block)), repr(textwrap.indent("a\n\nb\n", "+ ")), repr(textwrap.indent("a\n\nb", "| ", lambda l: True)))
