//! The accessibility bus: one connection, a proxy per object and call, and the registry's
//! list of applications and their windows.

use atspi::proxy::accessible::AccessibleProxyBlocking;
use atspi::proxy::action::ActionProxyBlocking;
use atspi::proxy::application::ApplicationProxyBlocking;
use atspi::proxy::component::ComponentProxyBlocking;
use atspi::proxy::editable_text::EditableTextProxyBlocking;
use atspi::proxy::selection::SelectionProxyBlocking;
use atspi::proxy::table::TableProxyBlocking;
use atspi::proxy::table_cell::TableCellProxyBlocking;
use atspi::proxy::text::TextProxyBlocking;
use atspi::proxy::value::ValueProxyBlocking;
use atspi::State;
use zbus::blocking::Connection;
use zbus::proxy::CacheProperties;

use super::{Node, Toolkit, TopLevel, REGISTRY, ROOT_PATH};

/// A builder of one blocking proxy on `conn` for `dest` + `path`, caching off.
macro_rules! proxy {
    ($proxy:ident, $conn:expr, $dest:expr, $path:expr) => {
        $proxy::builder($conn)
            .destination($dest.to_string())
            .and_then(|b| b.path($path.to_string()))
            .and_then(|b| b.cache_properties(CacheProperties::No).build())
    };
}

/// Methods `name(&self, node)`, each the node's proxy of one interface (built by
/// [`proxy!`]).
macro_rules! accessors {
    ($($name:ident: $proxy:ident),* $(,)?) => {
        $(
            pub(super) fn $name(&self, node: &Node) -> zbus::Result<$proxy<'static>> {
                proxy!($proxy, &self.conn, node.dest, node.path)
            }
        )*
    };
}

/// A connection to the accessibility bus. Each object is one proxy with property caching
/// off: caching would cost a `GetAll` and a signal subscription per object, more than the one
/// or two properties read.
pub(super) struct Bus {
    conn: Connection,
}

impl Bus {
    pub(super) fn new(conn: Connection) -> Self {
        Self { conn }
    }

    accessors! {
        accessible: AccessibleProxyBlocking,
        component: ComponentProxyBlocking,
        action: ActionProxyBlocking,
        text: TextProxyBlocking,
        editable_text: EditableTextProxyBlocking,
        value: ValueProxyBlocking,
        selection: SelectionProxyBlocking,
        table: TableProxyBlocking,
        table_cell: TableCellProxyBlocking,
    }

    /// How many applications are registered (to see when newly enabled ones have come).
    pub(super) fn application_count(&self) -> usize {
        self.accessible(&Node::new(REGISTRY, ROOT_PATH))
            .and_then(|root| root.child_count())
            .map(|n| n.max(0) as usize)
            .unwrap_or(0)
    }

    /// The toolkit of the application whose root is `app` (its name and version, two calls).
    pub(super) fn toolkit_of(&self, app: &Node) -> Toolkit {
        let read = proxy!(ApplicationProxyBlocking, &self.conn, app.dest, app.path)
            .and_then(|p| Ok((p.toolkit_name()?, p.version()?)));
        match read {
            Ok((name, version)) => Toolkit::from_name_and_version(&name, &version),
            Err(_) => Toolkit::default(),
        }
    }

    /// Every application's top-level windows, applications in the registry's order.
    pub(super) fn top_level(&self) -> zbus::Result<Vec<TopLevel>> {
        let root = self.accessible(&Node::new(REGISTRY, ROOT_PATH))?;
        let mut out = Vec::new();
        for app in root.get_children()? {
            let Some(app_node) = Node::of(&app, REGISTRY) else {
                continue;
            };
            // One application that does not answer (busy, or gone between the two calls) must
            // not hide the others.
            let Ok(windows) = self
                .accessible(&app_node)
                .and_then(|proxy| proxy.get_children())
            else {
                continue;
            };
            for w in windows {
                let Some(node) = Node::of(&w, &app_node.dest) else {
                    continue;
                };
                let Ok(states) = self.accessible(&node).and_then(|p| p.get_state()) else {
                    continue;
                };
                out.push(TopLevel {
                    app: app_node.clone(),
                    node,
                    showing: states.contains(State::Showing),
                    active: states.contains(State::Active),
                });
            }
        }
        Ok(out)
    }

    /// The process id behind a bus name on the accessibility bus, when the bus says.
    pub(super) fn process_id(&self, dest: &str) -> Option<u32> {
        let dbus = zbus::blocking::fdo::DBusProxy::new(&self.conn).ok()?;
        let name = zbus::names::BusName::try_from(dest).ok()?;
        dbus.get_connection_unix_process_id(name).ok()
    }
}
