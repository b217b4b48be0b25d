from string import Template
t = Template("$who likes ${what}s, costs $$5")
print(t.substitute(who="tim", what="kung pao"))
print(Template("$a $b").safe_substitute(a=1))
try: Template("$a").substitute()
except KeyError as e: print("KeyError", e)
try: Template("$").substitute()
except ValueError as e: print(e)
print(Template("$x").get_identifiers() if hasattr(Template, "get_identifiers") else None)
