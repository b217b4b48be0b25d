# restricted: refused (module email is not importable)
from email.message import EmailMessage
m = EmailMessage(); m["Subject"] = "Hi é"; m["From"] = "a@x"; m["To"] = "b@y"; m.set_content("body\n")
s = m.as_string(); print(s)
from email import message_from_string
print(message_from_string(s)["subject"])
