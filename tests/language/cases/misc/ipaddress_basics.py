import ipaddress as ip
a = ip.ip_address("192.168.1.10"); n = ip.ip_network("192.168.1.0/28")
print(a, a in n, n.num_addresses, n.netmask, n.broadcast_address, list(n.hosts())[:3], a.is_private, a.reverse_pointer)
print(ip.ip_address("::ffff:1.2.3.4").ipv4_mapped, ip.ip_address("2001:db8::1").exploded, ip.ip_address(3232235777), list(n.subnets(prefixlen_diff=2)))
print(list(ip.collapse_addresses([ip.ip_network("10.0.0.0/25"), ip.ip_network("10.0.0.128/25")])), ip.ip_interface("10.1.2.3/24").network)
try: ip.ip_network("10.0.0.1/24")
except ValueError as e: print(e)
try: ip.ip_address("999.1.1.1")
except ValueError as e: print(e)
