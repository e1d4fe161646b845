#!/bin/sh
# Opens a local page in Firefox ESR with a fresh profile and none of its first-run pages, at a
# fixed size: the browser of the desktop suite's tasks.
#
# Usage: [FIREFOX_PROFILE_DIR=DIR] firefox_page.sh PAGE.html [WIDTH HEIGHT]
#
# Firefox builds its accessibility tree only when assistive technology is on (the session's
# org.a11y.Status.IsEnabled, or GNOME_ACCESSIBILITY=1; the desktop suite sets both).
set -eu
page=$(realpath "$1")
width=${2:-1200}
height=${3:-760}
# The profile lives in the working directory (a task's scratch directory, removed with it),
# or where FIREFOX_PROFILE_DIR says.
profile="${FIREFOX_PROFILE_DIR:-$PWD/.firefox-profile}"
mkdir -p "$profile"
cat > "$profile/user.js" <<'PREFS'
user_pref("browser.aboutwelcome.enabled", false);
user_pref("browser.shell.checkDefaultBrowser", false);
user_pref("browser.startup.homepage_override.mstone", "ignore");
user_pref("browser.startup.page", 0);
user_pref("browser.tabs.warnOnClose", false);
user_pref("datareporting.healthreport.uploadEnabled", false);
user_pref("datareporting.policy.dataSubmissionEnabled", false);
user_pref("toolkit.telemetry.reportingpolicy.firstRun", false);
user_pref("app.update.disabledForTesting", true);
user_pref("browser.newtabpage.enabled", false);
user_pref("browser.sessionstore.resume_from_crash", false);
user_pref("startup.homepage_welcome_url", "about:blank");
user_pref("startup.homepage_welcome_url.additional", "");
user_pref("browser.translations.automaticallyPopup", false);
user_pref("sidebar.revamp", false);
PREFS
exec firefox-esr --no-remote --new-instance --profile "$profile" \
  --width "$width" --height "$height" "file://$page"
