"""List failed/errored tests of a junit xml with the first line of their message."""

import sys
import xml.etree.ElementTree as ET

for path in sys.argv[1:]:
    for case in ET.parse(path).getroot().iter("testcase"):
        for kind in ("failure", "error"):
            node = case.find(kind)
            if node is not None:
                msg = (node.get("message") or "").strip().splitlines()
                print(
                    f"{case.get('name')[:110]:110s} | {(msg[0] if msg else '')[:160]}"
                )
