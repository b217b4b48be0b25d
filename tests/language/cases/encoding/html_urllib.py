import html, urllib.parse as up
print(html.escape("<a href='x'>&</a>"), html.unescape("&lt;&eacute;&#x41;&amp;&nbsp;&notin;"))
u = up.urlparse("https://user:pw@ex.com:8080/p/a;x?q=1&q=2&r=%20#frag")
print(u, u.hostname, u.port, up.parse_qs(u.query), up.parse_qsl("a=1&b=&c", keep_blank_values=True))
print(up.quote("a b/é?"), up.quote_plus("a b&c"), up.unquote("%E2%9C%93"), up.urlencode({"q": "x y", "n": [1, 2]}, doseq=True), up.urljoin("http://a/b/c", "../d"))
